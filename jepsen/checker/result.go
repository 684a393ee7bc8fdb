package checker

import (
	"fmt"
	"strings"
)

// Result is one checker's verdict plus the numbers the report shows.
type Result struct {
	Name  string         `json:"name"`
	Valid bool           `json:"valid"`
	Stats map[string]int `json:"stats,omitempty"`
	// Errors are violations, each readable on its own (first N kept).
	Errors []string `json:"errors,omitempty"`
	// Notes are findings that do not fail the check (timing-dependent ones).
	Notes []string `json:"notes,omitempty"`
}

const maxErrors = 20

func (r *Result) errorf(format string, args ...any) {
	r.Valid = false
	if len(r.Errors) < maxErrors {
		r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
	}
}

func (r *Result) notef(format string, args ...any) {
	if len(r.Notes) < maxErrors {
		r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	}
}

func (r Result) String() string {
	v := "PASS"
	if !r.Valid {
		v = "FAIL"
	}
	s := fmt.Sprintf("%s %s %v", r.Name, v, r.Stats)
	if len(r.Errors) > 0 {
		s += "\n  " + strings.Join(r.Errors, "\n  ")
	}
	return s
}

// AllValid reports whether every result passed.
func AllValid(rs []Result) bool {
	for _, r := range rs {
		if !r.Valid {
			return false
		}
	}
	return true
}
