package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadConstraint means a placement constraint could not be parsed. The API
// maps it to 400; the message names the constraint and the reason.
var ErrBadConstraint = errors.New("invalid constraint")

// Constraint operators. A constraint compares one node label with values.
const (
	OpEqual    = "=="      // zone == a          label present and equal
	OpNotEqual = "!="      // zone != a          label absent or different
	OpIn       = "in"      // gpu in (a100,h100) label present and one of the values
	OpNotIn    = "not_in"  // arch not_in (arm)  label absent or none of the values ("not in" also accepted)
	OpHas      = "has"     // has gpu_model      label present (any value)
	OpNotHas   = "not_has" // not_has spot       label absent
	// Ordering operators compare a GPU's memory or compute capability
	// (constraint_gpu.go), never labels.
	OpGreaterEqual = ">="
	OpLessEqual    = "<="
	OpGreater      = ">"
	OpLess         = "<"
)

// validOps is listed in error messages, in this order.
var validOps = []string{OpEqual, OpNotEqual, OpIn, OpNotIn, OpHas, OpNotHas, OpGreaterEqual, OpLessEqual, OpGreater, OpLess}

// Constraint restricts which nodes a job may run on, by node label.
// Negative operators (!=, not_in, not_has) match nodes without the label, so
// "arch != arm" also accepts nodes that do not declare an arch.
type Constraint struct {
	Key    string   `json:"key"`
	Op     string   `json:"op"`
	Values []string `json:"values,omitempty"`
}

// ParseConstraints parses every constraint of a job spec; the error names the
// index of the first bad one.
func ParseConstraints(ss []string) ([]Constraint, error) {
	out := make([]Constraint, 0, len(ss))
	for i, s := range ss {
		c, err := ParseConstraint(s)
		if err != nil {
			return nil, fmt.Errorf("constraints[%d]: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseConstraint parses one constraint:
//
//	KEY == VALUE | KEY != VALUE | KEY in (V1,V2) | KEY not_in (V1,V2) | KEY not in (V1,V2)
//	has KEY | not_has KEY
//
// Parentheses around a list are optional. Keys starting with "gpu." name
// an attribute of the GPUs (constraint_gpu.go), which also take >=, <=, >
// and <. Errors wrap ErrBadConstraint.
func ParseConstraint(s string) (Constraint, error) {
	c, err := parseConstraint(s)
	if err != nil {
		return c, err
	}
	if err := checkGPUConstraint(c); err != nil {
		return Constraint{}, fmt.Errorf("%w %q: %v", ErrBadConstraint, s, err)
	}
	return c, nil
}

func parseConstraint(s string) (Constraint, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Constraint{}, fmt.Errorf("%w: empty constraint", ErrBadConstraint)
	}
	bad := func(format string, args ...any) (Constraint, error) {
		return Constraint{}, fmt.Errorf("%w %q: %s", ErrBadConstraint, orig, fmt.Sprintf(format, args...))
	}
	fields := strings.Fields(s)

	// Unary forms.
	if fields[0] == OpHas || fields[0] == OpNotHas {
		if len(fields) != 2 {
			return bad("%s takes exactly one label name", fields[0])
		}
		if err := checkKey(fields[1]); err != nil {
			return bad("%v", err)
		}
		return Constraint{Key: fields[1], Op: fields[0]}, nil
	}

	// Binary comparisons may be written without spaces ("zone==a").
	for _, op := range []string{OpEqual, OpNotEqual, OpGreaterEqual, OpLessEqual, OpGreater, OpLess} {
		if i := strings.Index(s, op); i >= 0 {
			key, val := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+len(op):])
			if err := checkKey(key); err != nil {
				return bad("%v", err)
			}
			if err := checkValue(val); err != nil {
				return bad("%v", err)
			}
			return Constraint{Key: key, Op: op, Values: []string{val}}, nil
		}
	}

	if len(fields) < 2 {
		return bad("missing operator (valid operators: %s)", strings.Join(validOps, ", "))
	}
	key := fields[0]
	if err := checkKey(key); err != nil {
		return bad("%v", err)
	}
	rest := strings.TrimSpace(s[len(key):])
	var op string
	switch {
	case hasWord(rest, "not_in"):
		op, rest = OpNotIn, rest[len("not_in"):]
	case hasWord(rest, "not"):
		after := strings.TrimSpace(rest[len("not"):])
		if !hasWord(after, "in") {
			return bad("unknown operator \"not %s\" (valid operators: %s)", firstWord(after), strings.Join(validOps, ", "))
		}
		op, rest = OpNotIn, after[len("in"):]
	case hasWord(rest, "in"):
		op, rest = OpIn, rest[len("in"):]
	default:
		return bad("unknown operator %q (valid operators: %s)", firstWord(rest), strings.Join(validOps, ", "))
	}
	vals, err := parseList(rest)
	if err != nil {
		return bad("%v", err)
	}
	return Constraint{Key: key, Op: op, Values: vals}, nil
}

// hasWord reports whether s starts with w followed by a space, "(" or the end.
func hasWord(s, w string) bool {
	if !strings.HasPrefix(s, w) {
		return false
	}
	r := s[len(w):]
	return r == "" || r[0] == ' ' || r[0] == '\t' || r[0] == '('
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

func parseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "(") {
		if !strings.HasSuffix(s, ")") {
			return nil, errors.New("unbalanced parenthesis in value list")
		}
		s = s[1 : len(s)-1]
	}
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty value list")
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if err := checkValue(v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func checkKey(k string) error {
	if k == "" {
		return errors.New("missing label name")
	}
	for _, r := range k {
		ok := r == '_' || r == '-' || r == '.' || r == '/' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("label name %q may only contain letters, digits, '_', '-', '.', '/'", k)
		}
	}
	return nil
}

func checkValue(v string) error {
	if v == "" {
		return errors.New("missing value")
	}
	if strings.ContainsAny(v, "(), \t") {
		return fmt.Errorf("value %q may not contain spaces, commas or parentheses", v)
	}
	return nil
}

// Match reports whether a node with these labels satisfies the constraint.
// Labels are compared exactly (case-sensitive).
func (c Constraint) Match(labels map[string]string) bool {
	v, ok := labels[c.Key]
	switch c.Op {
	case OpEqual:
		return ok && len(c.Values) == 1 && v == c.Values[0]
	case OpNotEqual:
		return !ok || len(c.Values) != 1 || v != c.Values[0]
	case OpIn:
		return ok && slices.Contains(c.Values, v)
	case OpNotIn:
		return !ok || !slices.Contains(c.Values, v)
	case OpHas:
		return ok
	case OpNotHas:
		return !ok
	}
	return false // unknown operators never match: fail closed
}

// NeedsLabel reports whether the constraint can only match nodes that carry
// the label (so a miss on an unlabelled node reads "missing label KEY").
func (c Constraint) NeedsLabel() bool {
	return c.Op == OpEqual || c.Op == OpIn || c.Op == OpHas
}

// String is the canonical form, which ParseConstraint reads back.
func (c Constraint) String() string {
	switch c.Op {
	case OpHas, OpNotHas:
		return c.Op + " " + c.Key
	case OpIn, OpNotIn:
		return c.Key + " " + c.Op + " (" + strings.Join(c.Values, ",") + ")"
	}
	return c.Key + " " + c.Op + " " + strings.Join(c.Values, ",")
}
