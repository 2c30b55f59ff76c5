package redact

// Treatment says what becomes of a client- or provider-supplied field
// before it is written anywhere: the database, a log line, a metric label,
// a CSV cell.
type Treatment string

// The treatments, from least to most kept.
const (
	// Hash stores Digest(key, value): equal values match, support finds a
	// row by digesting the exact value it was given, nothing is readable.
	Hash Treatment = "hash"
	// RedactText stores the value with every rule applied (the record's
	// policy for bodies; PolicyRedact for the short fields).
	RedactText Treatment = "redact"
	// Refuse answers 400 for a value the rules would change: the field is
	// needed verbatim (a pass-through model name is sent to the provider),
	// so it may not carry what redaction would remove.
	Refuse Treatment = "refuse"
	// Vocabulary keeps a value only when it is a short code-shaped word;
	// anything else is replaced by the classification's own code.
	Vocabulary Treatment = "vocabulary"
	// Describe stores a description instead of the value: an image by its
	// media type, size and SHA-256, or its URL without the query string
	// (URLWithoutSecrets) redacted under the record's policy.
	Describe Treatment = "describe"
	// Seal stores the value only encrypted (package seal), for the worker
	// or the owner; nothing of it in clear.
	Seal Treatment = "seal"
)

// Field names one stored field that carries client- or provider-supplied
// text.
type Field string

// The fields the table covers.
const (
	FieldMessages       Field = "request messages, response text"
	FieldMetadataKey    Field = "metadata keys"
	FieldMetadataValue  Field = "metadata values (strings and numbers)"
	FieldIdempotencyKey Field = "Idempotency-Key"
	FieldModel          Field = "pass-through model name"
	FieldProviderCode   Field = "provider error code"
	FieldProviderParam  Field = "provider error param"
	FieldReason         Field = "X-Reason"
	FieldTopupNote      Field = "top-up note"
	FieldRouteUser      Field = "route user"
	FieldRequestHash    Field = "the request as a whole (for the same-key check)"
	FieldToolCalls      Field = "tool calls (ids, names, arguments), tool results, refusals"
	FieldDefinitions    Field = "tool and response_format definitions (names, descriptions, schemas)"
	FieldParameters     Field = "stop sequences, user, safety_identifier, pass-through fields"
	FieldImages         Field = "image URLs and data"
	FieldRawBodies      Field = "the raw request (images included), the output, the answer"
)

// Fields is the table: each field's treatment. docs/operations.md's
// "Privacy: redaction and sealing" prints it, and a test holds the two together.
var Fields = map[Field]Treatment{
	FieldMessages:       RedactText,
	FieldMetadataKey:    RedactText,
	FieldMetadataValue:  RedactText,
	FieldIdempotencyKey: Hash,
	FieldModel:          Refuse,
	FieldProviderCode:   Vocabulary,
	FieldProviderParam:  Vocabulary,
	FieldReason:         RedactText,
	FieldTopupNote:      RedactText,
	FieldRouteUser:      Hash,
	FieldRequestHash:    Hash,
	FieldToolCalls:      RedactText,
	FieldDefinitions:    RedactText,
	FieldParameters:     RedactText,
	FieldImages:         Describe,
	FieldRawBodies:      Seal,
}

// Stored applies the table to the short fields: one value, redacted in a
// record of its own under PolicyRedact, or digested under key. A Refuse or
// Vocabulary field is returned unchanged: its owner decides (see Changes).
// The zero Stored, without a Redactor, redacts nothing and hashes with an
// empty key; build it with NewStored.
type Stored struct {
	r   *Redactor
	key []byte
}

// NewStored returns the applier for r and the digest key.
func NewStored(r *Redactor, key []byte) Stored { return Stored{r: r, key: key} }

// HashPrefix begins every value a Hash field stores: "h:" and the value's
// Digest.
const HashPrefix = "h:"

// Apply returns v as field f may be stored.
func (s Stored) Apply(f Field, v string) string {
	if v == "" {
		return v
	}
	switch Fields[f] {
	case Hash:
		return HashPrefix + Digest(s.key, v)
	case RedactText:
		if s.r == nil {
			return v
		}
		return s.r.Record().Text(v)
	}
	return v
}

// Changes reports whether redaction would change v: a Refuse field with
// such a value is answered 400.
func (s Stored) Changes(v string) bool {
	return s.r != nil && s.r.Record().Text(v) != v
}
