//go:build tools

// Package tools keeps sigs.k8s.io/karpenter/kwok (built by ./build.sh) in go.mod: Karpenter's core
// with its kwok cloud provider, the autoscaler the e2e scenario tests/e2e/test_autoscaling.py runs.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
