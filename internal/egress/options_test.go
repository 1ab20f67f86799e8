// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// What Argv builds, corral egress parses back to the same options, every
// field included.
func TestOptionsRoundTrip(t *testing.T) {
	var full Options
	v := reflect.ValueOf(&full).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("--value " + strconv.Itoa(i) + ",x")
		case reflect.Int64:
			f.SetInt(int64(1000 + i))
		default:
			t.Fatalf("the test does not set %s", v.Type().Field(i).Name)
		}
	}
	for _, o := range []Options{DefaultOptions(), full} {
		argv := o.Argv("/corral")
		if argv[0] != "/corral" || argv[1] != "egress" {
			t.Fatalf("argv %q", argv)
		}
		got, err := ParseArgs(argv[2:])
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("argv %q parses to\n%+v\nwant\n%+v", argv, got, o)
		}
	}
	if argv := DefaultOptions().Argv("c"); len(argv) != 2 {
		t.Fatalf("default argv %q", argv)
	}
}

// A bad command line is refused naming the flag, before anything is
// programmed.
func TestOptionsConfigRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := DefaultOptions()
	ok.Netns, ok.Token, ok.Upstreams = "self", "tok", "10.0.0.2:53"
	for _, tc := range []struct {
		set  func(o *Options)
		want string
	}{
		{func(o *Options) { o.Netns = "" }, "--netns"},
		{func(o *Options) { o.Token = "" }, "a token is required"},
		{func(o *Options) { o.TokenFile = empty }, "--token-file"},
		{func(o *Options) { o.TokenFile = filepath.Join(dir, "absent") }, "--token-file"},
		{func(o *Options) { o.Policy = `{"defaultAction":` }, "--policy"},
		{func(o *Options) { o.Deny = "10.0.0.0/8,nope" }, "--deny"},
		{func(o *Options) { o.AllowPrivate = "8.8.8.0/24" }, "--allow-private"},
		{func(o *Options) { o.ExemptMark = "0" }, "--exempt-mark"},
		{func(o *Options) { o.APITLSCert = "c.pem" }, "go together"},
		{func(o *Options) { o.Inbound = "80,0" }, "--inbound"},
		{func(o *Options) { o.Netns, o.Inbound = "/proc/1/ns/net", "80" }, "--inbound needs --netns self"},
		{func(o *Options) { o.UpstreamCA = empty }, "--upstream-ca"},
		{func(o *Options) { o.Upstreams = "resolver" }, "upstream"},
	} {
		o := ok
		tc.set(&o)
		if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", o, err, tc.want)
		}
	}
	cfg, err := ok.Config()
	if err != nil || cfg.Netns != "" || cfg.Token != "tok" || len(cfg.Upstreams) != 1 {
		t.Fatalf("a good command line: %+v %v", cfg, err)
	}
}
