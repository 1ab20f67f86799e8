// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The chat-completions wire types: only what the loop sends and reads.

type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Parameters  any    `json:"parameters"`
	} `json:"function"`
}

type chatRequest struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Tools    []toolDef `json:"tools,omitempty"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func text(s string) *string { return &s }

// model is an OpenAI-compatible chat-completions endpoint.
type model struct {
	url      string // .../chat/completions
	name     string
	key      string
	hc       *http.Client
	attempts int
	backoff  time.Duration
}

// attempt is one HTTP exchange with the model, for the trajectory.
type attempt struct {
	Status     int
	Duration   time.Duration
	RetryAfter time.Duration
	Err        string
}

// errModel is a model failure that retries did not cure.
var errModel = errors.New("model")

// complete sends one request, retrying 429 and 5xx answers and transport
// failures with backoff (honouring Retry-After), and reports each attempt.
func (m *model) complete(ctx context.Context, req chatRequest, report func(attempt)) (*chatResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	delay := m.backoff
	for n := 1; ; n++ {
		start := time.Now()
		res, status, wait, err := m.once(ctx, body)
		a := attempt{Status: status, Duration: time.Since(start), RetryAfter: wait}
		if err != nil {
			a.Err = err.Error()
		}
		report(a)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		retryable := status == 0 || status == http.StatusTooManyRequests || status >= 500
		if !retryable || n >= m.attempts {
			return nil, fmt.Errorf("%w: %v", errModel, err)
		}
		if wait == 0 {
			wait = delay
			delay = min(delay*2, 30*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (m *model) once(ctx context.Context, body []byte) (*chatResponse, int, time.Duration, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if m.key != "" {
		hr.Header.Set("Authorization", "Bearer "+m.key)
	}
	res, err := m.hc.Do(hr)
	if err != nil {
		return nil, 0, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return nil, res.StatusCode, 0, err
	}
	if res.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(b))
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return nil, res.StatusCode, retryAfter(res.Header.Get("Retry-After")), fmt.Errorf("the model answered %d: %s", res.StatusCode, msg)
	}
	var cr chatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		return nil, res.StatusCode, 0, fmt.Errorf("the model's answer is not a chat completion: %v", err)
	}
	if len(cr.Choices) == 0 {
		return nil, res.StatusCode, 0, errors.New("the model's answer has no choices")
	}
	return &cr, res.StatusCode, 0, nil
}

// retryAfter reads Retry-After in seconds or as an HTTP date, capped at a
// minute.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Minute)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), time.Minute)
	}
	return 0
}
