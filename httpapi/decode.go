package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// readBody reads the whole request body within the configured limit. A
// body over the limit gives an *http.MaxBytesError (413).
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields, and turns encoding/json's errors into field errors.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("body", "unexpected data after the JSON value")
	}
	return nil
}

// jsonError names the field behind an encoding/json error.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return invalid("body", "empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("body", "truncated JSON")
	case errors.As(err, &se):
		return invalid("body", "malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be %s, not a JSON %s", kindName(te.Type), te.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		// encoding/json quotes the key without escaping it: strip one
		// quote each side, and name the body when the key is empty.
		name = strings.TrimSuffix(strings.TrimPrefix(name, `"`), `"`)
		if name == "" {
			return invalid("body", `unknown field ""`)
		}
		return invalid(name, "unknown field")
	}
	return invalid("body", "%s", strings.TrimPrefix(msg, "json: "))
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return "a " + t.Kind().String()
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
