package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bash completion script, sourced into a real bash with the real binary
// on PATH, completes command names, subcommands and flags.
func TestSystemBashCompletion(t *testing.T) {
	bin := foremanBin(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "foreman")); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		script := `source <(foreman completion bash) || exit 1
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
_foreman_complete
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("complete %q: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"foreman", "jo"}, "job"},
		{[]string{"foreman", "job", "st"}, "status"},
		{[]string{"foreman", "version", "--clu"}, "--cluster"},
		{[]string{"foreman", "agent", "--conf"}, "--config"},
	} {
		got := complete(tc.words...)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("completing %q: got %q, want [%s]", tc.words, got, tc.want)
		}
	}
}
