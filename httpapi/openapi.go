package httpapi

import (
	_ "embed"
	"fmt"
	"net/http"
	"sync"
)

// OpenAPIPath is where every agent serves the API's description.
const OpenAPIPath = "/v1/openapi.json"

// openAPIYAML is the OpenAPI 3.0 description of the public API, kept by
// hand in YAML (comments, short lines) and held to the server by
// openapi_test.go; it is served as JSON.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON converts the description once, on first use.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	b, err := YAMLToJSON(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("httpapi/openapi.yaml: %w", err)
	}
	return b, nil
})

// OpenAPI returns the API's OpenAPI description as JSON, the body of
// GET /v1/openapi.json.
func OpenAPI() ([]byte, error) { return openAPIJSON() }

// openAPI handles GET /v1/openapi.json (open, like /v1/health: a client
// generator needs it before it has a token).
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	b, err := OpenAPI()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b) // the client went away; nothing useful to do
}
