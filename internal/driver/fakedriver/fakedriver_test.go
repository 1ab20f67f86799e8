// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package fakedriver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			d, err := New(Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			return d
		},
		Spec: func(*testing.T) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: "fake:ok"}, Entrypoint: []string{"sleep", "infinity"}, Labels: map[string]string{"team": "a"}}
		},
		ExitSpec: func(_ *testing.T, code int) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: fmt.Sprintf("fake:exit=%d", code)}}
		},
		NoPrograms: true,
		Kill: func(t *testing.T, id string) {
			if err := os.Remove(filepath.Join(dir, "objects", id+".json")); err != nil {
				t.Fatal(err)
			}
		},
	})
}
