package fsm

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestParseConstraint(t *testing.T) {
	tests := []struct {
		in   string
		want Constraint
	}{
		{"zone == a", Constraint{Key: "zone", Op: OpEqual, Values: []string{"a"}}},
		{"zone==a", Constraint{Key: "zone", Op: OpEqual, Values: []string{"a"}}},
		{"  zone   !=  b ", Constraint{Key: "zone", Op: OpNotEqual, Values: []string{"b"}}},
		{"gpu_model in (a100,h100)", Constraint{Key: "gpu_model", Op: OpIn, Values: []string{"a100", "h100"}}},
		{"gpu_model in (a100, h100 )", Constraint{Key: "gpu_model", Op: OpIn, Values: []string{"a100", "h100"}}},
		{"gpu_model in a100,h100", Constraint{Key: "gpu_model", Op: OpIn, Values: []string{"a100", "h100"}}},
		{"gpu_model in(a100)", Constraint{Key: "gpu_model", Op: OpIn, Values: []string{"a100"}}},
		{"arch not_in (arm64)", Constraint{Key: "arch", Op: OpNotIn, Values: []string{"arm64"}}},
		{"arch not in (arm64, riscv)", Constraint{Key: "arch", Op: OpNotIn, Values: []string{"arm64", "riscv"}}},
		{"has gpu_model", Constraint{Key: "gpu_model", Op: OpHas}},
		{"not_has spot", Constraint{Key: "spot", Op: OpNotHas}},
		{"k8s.io/zone == eu-1", Constraint{Key: "k8s.io/zone", Op: OpEqual, Values: []string{"eu-1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseConstraint(tt.in)
			if err != nil {
				t.Fatalf("ParseConstraint(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseConstraint(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			// The canonical form parses back to the same constraint.
			again, err := ParseConstraint(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip of %q via %q = %#v, %v", tt.in, got.String(), again, err)
			}
		})
	}
}

func TestParseConstraintErrors(t *testing.T) {
	tests := []struct {
		in       string
		contains []string
	}{
		{"", []string{"empty"}},
		{"zone >= a", []string{`>= compares gpu.memory and gpu.compute only`}},
		{"zone ~ a", []string{`unknown operator "~"`, "==, !=, in, not_in, has, not_has, >=, <=, >, <"}},
		{"zone = a", []string{`unknown operator "="`}},
		{"zone like a%", []string{`unknown operator "like"`}},
		{"zone not like (a)", []string{`unknown operator "not like"`}},
		{"zone", []string{"missing operator"}},
		{"zone ==", []string{"missing value"}},
		{"== a", []string{"missing label name"}},
		{"zone in ()", []string{"empty value list"}},
		{"zone in (a,,b)", []string{"missing value"}},
		{"zone in (a", []string{"unbalanced"}},
		{"has", []string{"exactly one label"}},
		{"has a b", []string{"exactly one label"}},
		{"zo ne == a", []string{"label name"}},
		{"zone == a b", []string{"may not contain spaces"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseConstraint(tt.in)
			if !errors.Is(err, ErrBadConstraint) {
				t.Fatalf("ParseConstraint(%q) error = %v, want ErrBadConstraint", tt.in, err)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestParseConstraintsNamesIndex(t *testing.T) {
	_, err := ParseConstraints([]string{"zone == a", "zone ~ b"})
	if !errors.Is(err, ErrBadConstraint) || !strings.Contains(err.Error(), "constraints[1]") {
		t.Fatalf("error = %v, want ErrBadConstraint naming constraints[1]", err)
	}
}

func TestConstraintMatch(t *testing.T) {
	labels := map[string]string{"zone": "a", "gpu_model": "a100"}
	tests := []struct {
		c    string
		want bool
	}{
		{"zone == a", true},
		{"zone == b", false},
		{"rack == 1", false}, // absent label never equals
		{"zone != a", false},
		{"zone != b", true},
		{"rack != 1", true}, // absent label is "not equal"
		{"gpu_model in (a100,h100)", true},
		{"gpu_model in (v100)", false},
		{"rack in (1,2)", false},
		{"gpu_model not_in (a100)", false},
		{"gpu_model not in (v100)", true},
		{"rack not_in (1)", true},
		{"has gpu_model", true},
		{"has rack", false},
		{"not_has rack", true},
		{"not_has zone", false},
	}
	for _, tt := range tests {
		t.Run(tt.c, func(t *testing.T) {
			c, err := ParseConstraint(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Match(labels); got != tt.want {
				t.Fatalf("%q.Match(%v) = %v, want %v", tt.c, labels, got, tt.want)
			}
		})
	}
	if (Constraint{Key: "zone", Op: "~"}).Match(labels) {
		t.Fatal("unknown operator matched; want fail closed")
	}
}

// Property: each operator and its negation agree on every label set.
func TestConstraintNegationProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vals := []string{"a", "b", "c"}
	neg := map[string]string{OpEqual: OpNotEqual, OpIn: OpNotIn, OpHas: OpNotHas}
	for i := 0; i < 2000; i++ {
		labels := map[string]string{}
		if rng.Intn(3) > 0 {
			labels["k"] = vals[rng.Intn(len(vals))]
		}
		for op, nop := range neg {
			c := Constraint{Key: "k", Op: op}
			switch op {
			case OpEqual:
				c.Values = []string{vals[rng.Intn(len(vals))]}
			case OpIn:
				c.Values = []string{vals[rng.Intn(len(vals))], vals[rng.Intn(len(vals))]}
			}
			n := c
			n.Op = nop
			if c.Match(labels) == n.Match(labels) {
				t.Fatalf("%s and %s agree on %v", c, n, labels)
			}
		}
	}
}
