package oci

import (
	"context"
	"testing"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

func TestZZDebugRunsc(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriverWith(t, Config{Root: root, Runtime: "runsc"})
	_, err := d.Create(context.Background(), driver.Spec{ID: "dbg1", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}})
	t.Logf("%s", errdefs.Detail(err))
	_ = d.Destroy(context.Background(), "dbg1")
}
