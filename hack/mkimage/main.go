// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command mkimage wraps a root file system tarball as a one-layer image,
// written as a `docker save` tarball that both `corral image import` and
// `docker load` take. images/*/build.sh use it; no registry is involved.
//
//	go run ./hack/mkimage -layer rootfs.tar -ref corral/code-interpreter:local \
//	  -env PATH=/usr/bin:/bin -workdir /workspace -cmd '["sleep","infinity"]' -o image.tar
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	layer := flag.String("layer", "", "the root file system as an uncompressed tar")
	ref := flag.String("ref", "", "the image's name, such as corral/code-interpreter:local")
	workdir := flag.String("workdir", "", "the image's working directory")
	cmdJSON := flag.String("cmd", "", "the image's command, a JSON array")
	out := flag.String("o", "", "the docker save tarball to write")
	var env, labels list
	flag.Var(&env, "env", "KEY=VALUE in the image's environment (repeatable)")
	flag.Var(&labels, "label", "KEY=VALUE label (repeatable)")
	flag.Parse()
	if err := run(*layer, *ref, *workdir, *cmdJSON, *out, env, labels); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(layerPath, ref, workdir, cmdJSON, out string, env, labels []string) error {
	if layerPath == "" || ref == "" || out == "" {
		return fmt.Errorf("-layer, -ref and -o are required")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg := cf.Config
	cfg.Env, cfg.WorkingDir = env, workdir
	if cmdJSON != "" {
		if err := json.Unmarshal([]byte(cmdJSON), &cfg.Cmd); err != nil {
			return fmt.Errorf("-cmd: %w", err)
		}
	}
	cfg.Labels = map[string]string{}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		cfg.Labels[k] = v
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		return err
	}
	cf, err = img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = "amd64", "linux", v1.Time{Time: time.Unix(0, 0).UTC()}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}
