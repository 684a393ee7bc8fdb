package httpapi

import (
	"encoding/json"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// YAMLToJSON converts a YAML document (a workflow or job spec) into the
// JSON the API decodes, so both formats go through the same strict
// decoder and name fields the same way.
func YAMLToJSON(b []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("YAML: %w", err)
	}
	return json.Marshal(jsonable(v))
}

// jsonable makes a decoded YAML value encodable as JSON (string keys,
// times as RFC 3339). It has no failure of its own: json.Marshal reports
// what JSON cannot hold (.nan, .inf).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}
