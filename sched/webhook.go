package sched

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// Headers of a webhook delivery (docs/api.md).
const (
	HeaderSignature       = "X-Foreman-Signature"        // "sha256=" + hex HMAC-SHA256(secret, body)
	HeaderEventID         = "X-Foreman-Event-ID"         // idempotency key: the same for every try
	HeaderEventType       = "X-Foreman-Event"            // e.g. "job.succeeded"
	HeaderDeliveryID      = "X-Foreman-Delivery"         // the delivery record's ID
	HeaderDeliveryAttempt = "X-Foreman-Delivery-Attempt" // 1 for the first try
)

// SignaturePrefix starts every X-Foreman-Signature value.
const SignaturePrefix = "sha256="

// Sign returns the X-Foreman-Signature of body under secret:
// "sha256=" followed by the lowercase hex HMAC-SHA256 of the exact body
// bytes, keyed with the secret's bytes.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether sig is body's signature under secret (in
// constant time): what a receiver does.
func VerifySignature(secret string, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// WebhookBody is the JSON a delivery POSTs: the event, encoded the same
// way on every try and by every leader (encoding/json of a struct is
// deterministic), so the signature is too.
func WebhookBody(ev *fsm.WebhookEvent) ([]byte, error) { return json.Marshal(ev) }

// maxAnswerRead bounds what is read of a receiver's answer (it is only
// drained so the connection can close cleanly; nothing of it is kept).
const maxAnswerRead = 4 << 10

// newDeliveryClient is the HTTP client of one deliverer: no redirects (a
// 3xx is an answer, and not a 2xx), no connection reuse across receivers
// beyond the transport's small idle pool.
func newDeliveryClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 2,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// tryDelivery POSTs d's event once and says how it went. secret may be
// empty (no signature header).
func tryDelivery(ctx context.Context, client *http.Client, d *fsm.Delivery, secret string) fsm.DeliveryOutcome {
	out := fsm.DeliveryOutcome{ID: d.ID, Attempt: d.Attempts + 1}
	body, err := WebhookBody(&d.Event)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "foreman-webhook")
	req.Header.Set(HeaderEventID, d.Event.ID)
	req.Header.Set(HeaderEventType, d.Event.Type)
	req.Header.Set(HeaderDeliveryID, d.ID)
	req.Header.Set(HeaderDeliveryAttempt, strconv.Itoa(out.Attempt))
	if secret != "" {
		req.Header.Set(HeaderSignature, Sign(secret, body))
	}
	resp, err := client.Do(req)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerRead))
	resp.Body.Close()
	out.Status = resp.StatusCode
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		out.Delivered = true
	} else {
		out.Error = fmt.Sprintf("HTTP %s", resp.Status)
	}
	return out
}
