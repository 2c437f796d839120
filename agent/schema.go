package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// returns declares a verb's outputSchema: what its structuredContent holds, the
// verb's result (a schema generated from its Go type, T) or, when the call was
// refused (isError), the refusal's {code, message}. Clients may check results
// against it, and the official TypeScript SDK (1.x) checks refusals too, so both
// must be in it.
func returns[T any]() mcp.ToolOption {
	return mcp.WithRawOutputSchema(outputSchema(reflect.TypeFor[T](), func(t *mcp.Tool) {
		mcp.WithOutputSchema[T]()(t)
	}))
}

// schemas holds each result type's outputSchema, built once: generating one
// takes most of a millisecond, and every session defines its endpoint's verbs.
var schemas sync.Map // reflect.Type → json.RawMessage

func outputSchema(typ reflect.Type, generate func(*mcp.Tool)) json.RawMessage {
	if s, ok := schemas.Load(typ); ok {
		return s.(json.RawMessage)
	}
	var t mcp.Tool
	generate(&t)
	if t.OutputSchema.Type != "object" || len(t.OutputSchema.Properties) == 0 {
		panic(fmt.Sprintf("agent: no output schema could be generated from %v", typ))
	}
	result, err := json.Marshal(t.OutputSchema)
	if err != nil {
		panic(fmt.Sprintf("agent: output schema of %v: %v", typ, err))
	}
	b, err := json.Marshal(map[string]any{"type": "object", "anyOf": []any{json.RawMessage(result), refusalSchema}})
	if err != nil {
		panic(fmt.Sprintf("agent: output schema of %v: %v", typ, err))
	}
	s, _ := schemas.LoadOrStore(typ, json.RawMessage(b))
	return s.(json.RawMessage)
}

// refusalSchema is the structuredContent of a refused call (errorPayload).
var refusalSchema = map[string]any{
	"type":        "object",
	"description": "a refused call (isError is true)",
	"properties": map[string]any{
		"code": map[string]any{"type": "string", "enum": Codes,
			"description": "what kind of refusal: a stable code to act on"},
		"message": map[string]any{"type": "string", "description": "what was refused and why"},
	},
	"required":             []string{"code", "message"},
	"additionalProperties": false,
}
