package checker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Record is one line written by the probe job: "<kind> <job> <attempt>
// <token> <node> <unix-nanos>", kind being start, end or effect.
type Record struct {
	Kind    string
	Job     string
	Attempt int
	Token   uint64
	Node    string
	At      int64 // unix ns, host wall clock (all namespaces share it)
}

func (r Record) String() string {
	return fmt.Sprintf("%s %s %d %d %s %d", r.Kind, r.Job, r.Attempt, r.Token, r.Node, r.At)
}

// ParseRecords reads records in file order. Torn lines (a node killed while
// appending) are skipped and counted.
func ParseRecords(rd io.Reader) (recs []Record, torn int, err error) {
	torn, err = scanRecords(rd, func(f []string) bool {
		if len(f) != 6 {
			return false
		}
		a, t, at, ok := parseCommon(f)
		if ok {
			recs = append(recs, Record{Kind: f[0], Job: f[1], Attempt: a, Token: t, Node: f[4], At: at})
		}
		return ok
	})
	return recs, torn, err
}

// parseCommon parses the numbers every probe's line holds: the attempt
// (f[2]), the fencing token (f[3]) and, last, the time.
func parseCommon(f []string) (attempt int, token uint64, at int64, ok bool) {
	a, err1 := strconv.Atoi(f[2])
	t, err2 := strconv.ParseUint(f[3], 10, 64)
	at, err3 := strconv.ParseInt(f[len(f)-1], 10, 64)
	return a, t, at, err1 == nil && err2 == nil && err3 == nil
}

// scanRecords calls parse with the fields of each non-blank line of a
// probe's record file and counts the lines it refuses: torn lines, left
// by a node killed while appending.
func scanRecords(rd io.Reader, parse func(fields []string) bool) (torn int, err error) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && !parse(f) {
			torn++
		}
	}
	return torn, sc.Err()
}

// ReadRecordFiles parses every file matching glob, concatenated.
func ReadRecordFiles(glob string) ([]Record, int, error) {
	return ReadFiles(glob, ParseRecords)
}

// ReadFiles parses every file matching glob with parse (ParseGangRecords,
// ParseGPURecords), concatenated, and adds up the torn lines.
func ReadFiles[T any](glob string, parse func(io.Reader) ([]T, int, error)) ([]T, int, error) {
	paths, err := filepath.Glob(glob)
	if err != nil {
		return nil, 0, err
	}
	var all []T
	torn := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, err
		}
		recs, n, err := parse(f)
		f.Close()
		if err != nil {
			return nil, 0, err
		}
		all = append(all, recs...)
		torn += n
	}
	return all, torn, nil
}
