package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

type anthropicStreamRequest struct {
	messagesRequest
	Stream bool `json:"stream"`
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string `json:"model"`
		Usage struct {
			InputTokens              int64 `json:"input_tokens"`
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Stream streams a Messages API answer: text_delta events become deltas,
// message_start and message_delta carry the usage, message_stop ends it.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	if req.MaxTokens <= 0 {
		return nil, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	body := anthropicStreamRequest{messagesRequest: messagesBody(req), Stream: true}
	h := c.headers()

	out := &Response{}
	var text strings.Builder
	usage := &Usage{}
	status, err := sseCall{
		hc: c.hc, url: c.endpoint, header: h, payload: body, key: req.IdempotencyKey, classify: ClassifyAnthropic,
		onData: func(data string) (bool, error) {
			var ev anthropicEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return false, malformed(http.StatusOK, err)
			}
			switch ev.Type {
			case "message_start":
				if ev.Message != nil {
					out.Model = ev.Message.Model
					u := ev.Message.Usage
					in, ok := tokenSum(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
					if !ok {
						// Negative usage would credit the budget.
						return false, malformed(http.StatusOK, nil)
					}
					usage.InputTokens = in
				}
			case "content_block_delta":
				if ev.Delta != nil && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
					text.WriteString(ev.Delta.Text)
					if onDelta != nil {
						onDelta(ev.Delta.Text)
					}
				}
			case "message_delta":
				if ev.Delta != nil && ev.Delta.StopReason != "" {
					out.FinishReason = ev.Delta.StopReason
				}
				if ev.Usage != nil {
					out, ok := tokenSum(ev.Usage.OutputTokens)
					if !ok {
						return false, malformed(http.StatusOK, nil)
					}
					usage.OutputTokens = out
				}
			case "message_stop":
				return true, nil
			case "error":
				return false, ClassifyAnthropic(http.StatusInternalServerError, nil, []byte(data))
			}
			return false, nil
		},
		whole: func(status int, header http.Header, b []byte) error {
			r, err := parseMessage(status, header, b)
			if err == nil {
				*out = *r
				text.WriteString(r.Content)
				usage = r.Usage
				if onDelta != nil {
					onDelta(r.Content)
				}
			}
			return err
		},
	}.do(ctx)
	out.Status = status
	out.Content = text.String()
	if usage != nil && (usage.InputTokens > 0 || usage.OutputTokens > 0) {
		out.Usage = usage
	}
	if err != nil {
		return out, err
	}
	if out.FinishReason == "refusal" && out.Content == "" {
		return out, &Error{Class: ClassRejected, Status: status, Code: CodeRefusal}
	}
	if out.Content == "" {
		return out, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	return out, nil
}
