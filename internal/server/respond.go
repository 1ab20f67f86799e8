// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
)

// maxBody bounds JSON request bodies.
const maxBody = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONBody writes body, encoded already as writeJSON encodes (a
// line end after the value).
func writeJSONBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err in the contract's error shape. Only a
// user-facing error's text reaches the body; any other is logged here,
// once, with the request id, which the generic sentence users see names.
// A failure is logged as an error; a refusal (4xx, and 501: something
// this server does not do) only when its text is not in the body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.errorAnswer(w, r, err)
	if k := errhttp.KindName(err); k != "" {
		w.Header().Set(errhttp.HeaderKind, k)
	}
	s.writeErrorStatus(w, r, status, code, msg)
}

// errorAnswer is what an error's answer says, in either API's shape: the
// status, corral's code and the message; it logs the error once and sets
// the quota headers.
func (s *Server) errorAnswer(w http.ResponseWriter, r *http.Request, err error) (status int, code, msg string) {
	status, code, msg = errhttp.FromError(err)
	switch {
	case status >= 500 && status != http.StatusNotImplemented:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	case !errdefs.UserFacing(err):
		s.log.InfoContext(r.Context(), "request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	if !errdefs.UserFacing(err) {
		msg = fmt.Sprintf("%s (request id %s)", msg, w.Header().Get(api.HeaderRequestID))
	}
	quotaHeaders(w, err)
	if status == 499 {
		// The client is gone; nobody reads this.
		status = http.StatusBadRequest
	}
	return status, code, msg
}

func (s *Server) writeErrorStatus(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Code: code, Message: msg})
}

// decodeJSON reads a JSON body into v with a size limit and clear errors.
// Empty bodies are an error unless optional.
func decodeJSON(r *http.Request, v any, optional bool) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "could not read the request body")
	}
	if len(body) > maxBody {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "the request body is larger than %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if optional {
			return body, nil
		}
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "a JSON request body is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "the request body has data after the JSON value")
	}
	return body, nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "the request body is not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "%s: expected %s, got JSON %s", field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "the request body is truncated JSON")
	}
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "the request body is not valid: %v", err)
}
