// Package oapiclient is a client generated from the API's OpenAPI
// description (httpapi/openapi.yaml) by oapi-codegen, for the operations
// a test needs (submit, read and list jobs). It proves the description is
// usable by a generator; the CLI uses httpapi.Client, not this.
// TestOpenAPIGeneratedClient (httpapi) fails when the description changed
// since the code was generated: run go generate ./httpapi/internal/oapiclient.
package oapiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../openapi.yaml
