// Package anthropicwire is Anthropic's Messages API on the wire: the
// request body and its content blocks, tool definitions, the answer, the
// stream events and the error envelope, as JSON. It holds shapes and
// nothing else: which fields Tollgate carries, how a request becomes a
// task and how an answer is read are the server's and the provider's to
// decide. The server reads Anthropic clients' requests into these types
// and writes its answers from them, the provider adapter writes its
// calls and reads Anthropic's answers with them, and the fake provider
// reads and answers with them, so that the three cannot drift apart.
//
// Optional fields are pointers where a reader must tell a field sent
// empty from one not sent (the server refuses a field a block type does
// not have, by name); writers leave them nil to omit them. The field
// order of each type is the order its JSON is written in: the answer's
// in the Messages API's order, the stream events' (and the error
// envelope's) in the order of their names.
package anthropicwire
