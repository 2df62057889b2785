//go:build tools

// Package tools keeps sigs.k8s.io/kwok/cmd/kwok (built by ../build.sh) in go.mod.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
