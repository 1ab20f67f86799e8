// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"reflect"
	"strconv"
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
