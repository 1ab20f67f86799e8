// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// modelServer answers with the statuses given, then a completion.
func modelServer(t *testing.T, answers ...func(w http.ResponseWriter)) (*model, func() []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(at)
		at = append(at, time.Now())
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if n < len(answers) {
			answers[n](w)
			return
		}
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	m := &model{url: srv.URL + "/v1/chat/completions", name: "m", key: "k", hc: srv.Client(), attempts: 4, backoff: 10 * time.Millisecond}
	return m, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

func status(code int, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d"}}`, code)
	}
}

func TestModelRetries(t *testing.T) {
	t.Parallel()
	t.Run("429 with Retry-After, then 502, then an answer", func(t *testing.T) {
		t.Parallel()
		m, at := modelServer(t, status(http.StatusTooManyRequests, "Retry-After", "1"), status(http.StatusBadGateway))
		var attempts []attempt
		res, err := m.complete(t.Context(), chatRequest{Model: "m"}, func(a attempt) { attempts = append(attempts, a) })
		if err != nil || res.Usage.PromptTokens != 7 || len(attempts) != 3 {
			t.Fatalf("complete = %+v, %v; %d attempts", res, err, len(attempts))
		}
		if attempts[0].Status != 429 || attempts[0].RetryAfter != time.Second || attempts[1].Status != 502 || attempts[2].Status != 200 {
			t.Fatalf("attempts: %+v", attempts)
		}
		if ts := at(); ts[1].Sub(ts[0]) < 950*time.Millisecond {
			t.Fatalf("the retry came %v after Retry-After: 1", ts[1].Sub(ts[0]))
		}
	})
	t.Run("a client error is not retried", func(t *testing.T) {
		t.Parallel()
		m, at := modelServer(t, status(http.StatusBadRequest))
		_, err := m.complete(t.Context(), chatRequest{Model: "m"}, func(attempt) {})
		if !errors.Is(err, errModel) || !strings.Contains(err.Error(), "400") || len(at()) != 1 {
			t.Fatalf("err %v after %d requests", err, len(at()))
		}
	})
	t.Run("attempts are bounded", func(t *testing.T) {
		t.Parallel()
		var five []func(http.ResponseWriter)
		for range 5 {
			five = append(five, status(http.StatusServiceUnavailable))
		}
		m, at := modelServer(t, five...)
		_, err := m.complete(t.Context(), chatRequest{Model: "m"}, func(attempt) {})
		if !errors.Is(err, errModel) || len(at()) != 4 {
			t.Fatalf("err %v after %d requests, want 4", err, len(at()))
		}
	})
	t.Run("an answer that is not a completion", func(t *testing.T) {
		t.Parallel()
		m, _ := modelServer(t, func(w http.ResponseWriter) { fmt.Fprint(w, `{"choices":[]}`) }, func(w http.ResponseWriter) { fmt.Fprint(w, `not json`) })
		for range 2 {
			if _, err := m.complete(t.Context(), chatRequest{Model: "m"}, func(attempt) {}); err == nil {
				t.Fatal("a bad answer was accepted")
			}
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, " 3 ": 3 * time.Second, "-1": 0, "soon": 0,
		"600": time.Minute, time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat): time.Minute} {
		if got := retryAfter(in); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
	if got := retryAfter(time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat)); got < 18*time.Second || got > 20*time.Second {
		t.Errorf("an HTTP date 20 s ahead: %v", got)
	}
}
