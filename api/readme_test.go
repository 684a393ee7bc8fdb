package api_test

import (
	"os"
	"strings"
	"testing"
)

// The README's Go example is the body of Example (example_test.go), which
// runs against a real agent: this keeps the two the same text.
func TestREADMEExampleIsRun(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "## Go client")
	if i < 0 {
		t.Fatal(`README.md: no "## Go client" section`)
	}
	j := strings.Index(s[i:], "```go\n")
	if j < 0 {
		t.Fatal(`README.md: no Go block under "## Go client"`)
	}
	block := s[i+j+len("```go\n"):]
	block = block[:strings.Index(block, "```")]
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	// The example's body is indented one tab more than the README's block.
	var indented strings.Builder
	for _, line := range strings.SplitAfter(block, "\n") {
		if strings.TrimSpace(line) != "" {
			indented.WriteString("\t")
		}
		indented.WriteString(line)
	}
	if !strings.Contains(string(ex), indented.String()) {
		t.Errorf("README.md's Go example is not in Example (api/example_test.go); keep them the same:\n%s", block)
	}
}
