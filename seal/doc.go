// Package seal owns the data key and the bodies kept only encrypted: the
// raw request a worker sends to the provider, and the output and answer a
// client polls for (redact.Seal in the table of stored fields).
//
// A Sealer encrypts with AES-256-GCM under the data key, each sealed body
// bound to its row, and derives from the same key the key of the digests
// redact stores where no text may be. DataKey reads the data key from the
// environment, or else from the database's data_keys table, generating it
// there on first use so that every instance shares it.
package seal
