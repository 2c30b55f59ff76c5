package server

import (
	"fmt"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// A provider's context-length refusal is answered in the words its own
// API uses, which clients detect: LangChain raises ContextOverflowError
// when an OpenAI error says "maximum context length" and an Anthropic 400
// says "prompt is too long". The figures are integers the provider's
// message gave (tasks.FailureDetail.ContextWindow, ContextTokens); the
// sentence around them is Tollgate's, never the provider's text.

// contextRefused reports whether d is the detail of a context-length
// refusal by the provider.
func contextRefused(d tasks.FailureDetail) bool { return d.ProviderCode == provider.CodeContextLength }

// oaiContextMessage is OpenAI's wording of a context-length refusal.
func oaiContextMessage(d tasks.FailureDetail) string {
	const fix = " Please reduce the length of the messages."
	switch w, n := d.ContextWindow, d.ContextTokens; {
	case w > 0 && n > 0:
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens.", w, n) + fix
	case w > 0:
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in more.", w) + fix
	case n > 0:
		return fmt.Sprintf("Your messages resulted in %d tokens, more than this model's maximum context length.", n) + fix
	}
	return "Your messages exceed this model's maximum context length." + fix
}

// antContextMessage is Anthropic's wording of a context-length refusal.
func antContextMessage(d tasks.FailureDetail) string {
	switch w, n := d.ContextWindow, d.ContextTokens; {
	case w > 0 && n > 0:
		return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", n, w)
	case w > 0:
		return fmt.Sprintf("prompt is too long: more than %d tokens, the maximum", w)
	case n > 0:
		return fmt.Sprintf("prompt is too long: %d tokens > the model's maximum", n)
	}
	return "prompt is too long for the model's context window"
}
