package agents

import (
	"encoding/json"
	"slices"
	"strings"
)

// toolDef is a function tool a request offers: its name and the JSON
// Schema of its arguments.
type toolDef struct {
	name   string
	schema map[string]any
}

// shellTools are the names coding agents give the tool that runs a
// command, most specific first.
var shellTools = []string{"bash", "exec_command", "shell", "local_shell", "run_command", "run_shell_command"}

// pickTool is the shell tool when the request offers one, else the first.
func pickTool(tools []toolDef) toolDef {
	for _, want := range shellTools {
		for _, t := range tools {
			if strings.EqualFold(t.name, want) {
				return t
			}
		}
	}
	return tools[0]
}

// argsFor returns arguments valid for schema: every required property,
// and a command property, set; a command runs ToolCommand.
func argsFor(tool string, schema map[string]any) []byte {
	v := valueFor("", schema, 0)
	if _, ok := v.(map[string]any); !ok {
		v = map[string]any{}
	}
	b, _ := json.Marshal(v)
	return b
}

func valueFor(name string, schema map[string]any, depth int) any {
	if enum, _ := schema["enum"].([]any); len(enum) > 0 {
		return enum[0]
	}
	typ := schemaType(schema)
	switch typ {
	case "object":
		out := map[string]any{}
		if depth > 4 {
			return out
		}
		props, _ := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		for key, p := range props {
			ps, _ := p.(map[string]any)
			if slices.Contains(required, any(key)) || isCommand(key) || key == "description" {
				out[key] = valueFor(key, ps, depth+1)
			}
		}
		return out
	case "array":
		items, _ := schema["items"].(map[string]any)
		if isCommand(name) && schemaType(items) == "string" {
			return []string{"bash", "-lc", ToolCommand}
		}
		if min, _ := schema["minItems"].(float64); min > 0 {
			return []any{valueFor("", items, depth+1)}
		}
		return []any{}
	case "integer", "number":
		if min, ok := schema["minimum"].(float64); ok {
			return min
		}
		return 1
	case "boolean":
		return false
	case "null":
		return nil
	}
	switch {
	case isCommand(name):
		return ToolCommand
	case name == "description":
		return "Print the answer"
	}
	return "x"
}

func isCommand(name string) bool { return name == "command" || name == "cmd" }

// schemaType is a schema's type, the first non-null of a list.
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, _ := x.(string); s != "" && s != "null" {
				return s
			}
		}
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	return "string"
}

func asObject(v any) map[string]any { m, _ := v.(map[string]any); return m }

// textOf is the text of a tool result: a string, or the text of its
// parts.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, p := range x {
			pm := asObject(p)
			if s, ok := pm["text"].(string); ok {
				b.WriteString(s)
			} else if s, ok := pm["output"].(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	case map[string]any:
		if s, ok := x["output"].(string); ok {
			return s
		}
		return textOf(x["content"])
	}
	return ""
}

func chatTools(req map[string]any) []toolDef {
	var out []toolDef
	for _, t := range asList(req["tools"]) {
		fn := asObject(asObject(t)["function"])
		if name, _ := fn["name"].(string); name != "" {
			out = append(out, toolDef{name: name, schema: asObject(fn["parameters"])})
		}
	}
	return out
}

func chatToolResult(req map[string]any) (string, bool) {
	msgs := asList(req["messages"])
	if len(msgs) == 0 {
		return "", false
	}
	last := asObject(msgs[len(msgs)-1])
	if last["role"] != "tool" {
		return "", false
	}
	return textOf(last["content"]), true
}

func responsesTools(req map[string]any) []toolDef {
	var out []toolDef
	for _, t := range asList(req["tools"]) {
		tm := asObject(t)
		if tm["type"] != "function" {
			continue
		}
		if name, _ := tm["name"].(string); name != "" {
			out = append(out, toolDef{name: name, schema: asObject(tm["parameters"])})
		}
	}
	return out
}

// responsesToolResult is the output of a function call that comes after
// the last user message.
func responsesToolResult(req map[string]any) (string, bool) {
	items := asList(req["input"])
	for i := len(items) - 1; i >= 0; i-- {
		it := asObject(items[i])
		switch {
		case it["type"] == "function_call_output":
			return textOf(it["output"]), true
		case it["role"] == "user":
			return "", false
		}
	}
	return "", false
}

func messagesTools(req map[string]any) []toolDef {
	var out []toolDef
	for _, t := range asList(req["tools"]) {
		tm := asObject(t)
		if typ, _ := tm["type"].(string); typ != "" && typ != "custom" {
			continue
		}
		if name, _ := tm["name"].(string); name != "" {
			out = append(out, toolDef{name: name, schema: asObject(tm["input_schema"])})
		}
	}
	return out
}

// messagesToolResult is the text of a tool_result block in the last
// user message.
func messagesToolResult(req map[string]any) (string, bool) {
	msgs := asList(req["messages"])
	if len(msgs) == 0 {
		return "", false
	}
	last := asObject(msgs[len(msgs)-1])
	for _, b := range asList(last["content"]) {
		bm := asObject(b)
		if bm["type"] == "tool_result" {
			return textOf(bm["content"]), true
		}
	}
	return "", false
}

func includes(req map[string]any, what string) bool {
	for _, x := range asList(req["include"]) {
		if x == what {
			return true
		}
	}
	return false
}

func asList(v any) []any { l, _ := v.([]any); return l }
