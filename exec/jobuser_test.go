package exec

import (
	"errors"
	"testing"
)

func TestCheckUser(t *testing.T) {
	cases := []struct {
		allowed      []string
		user, driver string
		ok           bool
	}{
		{nil, "root", ProcessDriverName, true},
		{[]string{"*"}, "root", ProcessDriverName, true},
		{[]string{"nobody"}, "nobody", ProcessDriverName, true},
		{[]string{"nobody"}, "nobody:nogroup", ProcessDriverName, true},
		{[]string{"nobody"}, "root", ProcessDriverName, false},
		{[]string{"nobody"}, "0", ContainerDriverNameForTest, false},
		{[]string{"nobody"}, "", ProcessDriverName, false}, // would run as the agent
		{[]string{"nobody"}, "", ContainerDriverNameForTest, true},
	}
	for _, tc := range cases {
		w := &Worker{cfg: WorkerConfig{Node: "n1", JobUsers: tc.allowed}}
		err := w.checkUser(tc.user, tc.driver)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUserNotAllowed)) {
			t.Errorf("allowed %v, user %q, driver %s: err = %v, want ok=%v", tc.allowed, tc.user, tc.driver, err, tc.ok)
		}
	}
}

// ContainerDriverNameForTest stands for any driver other than process.
const ContainerDriverNameForTest = "container"
