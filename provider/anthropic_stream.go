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
			InputTokens              tokenCount `json:"input_tokens"`
			CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens tokenCount `json:"output_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Stream streams a Messages API answer: text_delta events become deltas,
// message_start and message_delta carry the usage, message_stop ends it.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if req.OutputLimit() <= 0 {
		return nil, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	body := anthropicStreamRequest{messagesRequest: messagesBody(req), Stream: true}
	h := c.headers()

	out := &Response{}
	var text strings.Builder
	var finish string
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
					usage.InputTokens = addTokens(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
				}
			case "content_block_delta":
				if ev.Delta != nil && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
					text.WriteString(ev.Delta.Text)
					if onDelta != nil {
						onDelta(Delta{Content: ev.Delta.Text})
					}
				}
			case "message_delta":
				if ev.Delta != nil && ev.Delta.StopReason != "" {
					finish = ev.Delta.StopReason
				}
				if ev.Usage != nil {
					usage.OutputTokens = int64(ev.Usage.OutputTokens)
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
				text.WriteString(r.Text())
				finish = r.FinishReason()
				usage = r.Usage
				if onDelta != nil {
					onDelta(Delta{Content: r.Text()})
				}
			}
			return err
		},
	}.do(ctx)
	out.Status = status
	content := text.String()
	out.Choices = TextResponse(content, finish).Choices
	if usage != nil && (usage.InputTokens != 0 || usage.OutputTokens != 0) {
		out.Usage = usage
	}
	if err != nil {
		return out, err
	}
	if finish == "refusal" && content == "" {
		return out, &Error{Class: ClassRejected, Status: status, Code: CodeRefusal}
	}
	if content == "" {
		return out, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	return out, nil
}
