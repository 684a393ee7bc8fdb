package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/objstore"
	"github.com/foreman-sched/foreman/objstore/objstoretest"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix, err string
	}{
		{in: "s3://b", bucket: "b"},
		{in: "s3://b/", bucket: "b"},
		{in: "s3://b/p/q/", bucket: "b", prefix: "p/q"},
		{in: "http://b/p", err: "want s3://bucket/prefix"},
		{in: "s3:///p", err: "no bucket"},
		{in: "s3://k:s@b/p", err: "credentials do not go in the URL"},
		{in: "s3://b/a/../c", err: ". or .."},
	} {
		l, err := objstore.ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || l.Bucket != tc.bucket || l.Prefix != tc.prefix {
			t.Errorf("%s: %+v %v, want %s %s", tc.in, l, err, tc.bucket, tc.prefix)
		}
	}
	for _, e := range []string{"ftp://x", "http://h/path", "h/p", "u@h"} {
		if err := (objstore.Config{URL: "s3://b", Endpoint: e}).Validate(); err == nil {
			t.Errorf("endpoint %q accepted", e)
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestStore runs against a real SeaweedFS: a small object, a multipart
// one (three parts), a missing key, delete, a missing bucket and wrong
// credentials.
func TestStore(t *testing.T) {
	srv := objstoretest.Start(t, "foreman")
	cfg := srv.Config("pre/fix")
	cfg.PartSize = 5 << 20
	s, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := s.Key("ns/j/1/a"); got != "pre/fix/ns/j/1/a" {
		t.Fatalf("Key = %q", got)
	}
	big := make([]byte, 12<<20+123) // > 2 parts of 5 MiB
	rand.Read(big)
	for name, data := range map[string][]byte{"small": []byte("hello"), "big": big, "empty": nil} {
		key := s.Key(name)
		if err := s.Put(ctx(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		r, size, err := s.Open(ctx(t), key)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || size != int64(len(data)) || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (size %d, err %v), want %d", name, len(got), size, err, len(data))
		}
	}
	if err := s.Delete(ctx(t), []string{s.Key("small"), s.Key("never")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx(t), s.Key("small")); !errors.Is(err, objstore.ErrNoSuchObject) {
		t.Fatalf("open deleted: %v, want ErrNoSuchObject", err)
	}

	cfg.URL = "s3://no-such-bucket"
	nb, _ := objstore.New(cfg)
	if err := nb.Check(ctx(t)); !errors.Is(err, objstore.ErrNoBucket) {
		t.Fatalf("missing bucket: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	cfg.URL = "s3://foreman"
	bad, _ := objstore.New(cfg)
	err = bad.Check(ctx(t))
	if !errors.Is(err, objstore.ErrAccess) {
		t.Fatalf("wrong credentials: %v, want ErrAccess", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("the error shows the secret: %v", err)
	}
}
