//go:build !unix

package flink

import "errors"

func lockFile(string) (func(), error) { return nil, errors.New("flink: no file locks") }
