// Package provider turns one model call into either a Response or a
// classified *Error, and nothing more.
//
// It owns the wire formats of the model providers (the OpenAI-compatible chat
// completions API, spoken by OpenAI and the many servers that copy it; the
// Anthropic Messages API; the Cloudflare Workers AI REST API), one Client per
// format behind the Client interface (New picks one by kind), and the failure
// classifier. The classifier exists because the rest of Tollgate must decide,
// without reading free text, whether to retry a failed call
// (ClassTransient), pause for the provider's rate limit (ClassThrottled),
// stop because the account is out of credit or its key is refused
// (ClassExhausted), fail the task because the request itself is bad
// (ClassRejected), or check the journal before repeating a call that the
// provider may already have processed and billed (ClassAmbiguous).
//
// There is one classifier with a small dialect per wire format
// (ClassifyOpenAI, ClassifyAnthropic, ClassifyCloudflare; Classify dispatches
// by kind). It reads the provider's machine-readable code and type fields
// first, then robust hints in the message, and only then the HTTP status,
// because providers put billing failures behind 400 and 429 and use type
// fields that mislead. An answer that only its status classified is marked
// (Error.Unclassified), so that callers can count the bodies the classifier
// has yet to learn. The provider's own message text is kept on the error but
// never in Error() or an exported field: it can echo prompts or account
// details, so it must not reach logs or API clients.
//
// The adapters share their HTTP plumbing (transport.go), so a lost answer
// means the same in every format: nothing sent is transient, sent but
// unanswered is ambiguous.
//
// The package imports no other Tollgate package. Its test double is the fake
// provider in provider/fake, an HTTP server that speaks all three formats.
package provider
