package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags '-X main.version=v0.1.0'
// (make build sets it from git describe). Empty: the module version from the
// build info, as `go install ...@v0.1.0` records it.
var version string

// versionLine is the output of `inflight version`, for example
//
//	inflight v0.1.0 (commit 1a2b3c4d5e6f, go1.26.8 linux/amd64)
func versionLine() string {
	v, commit, dirty := version, "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				commit = s.Value[:min(len(s.Value), 12)]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = true
			}
		}
	}
	if commit != "" && dirty {
		commit += "-dirty"
	}
	if v == "" {
		v = "(devel)"
	}
	build := fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if commit != "" {
		build = "commit " + commit + ", " + build
	}
	return fmt.Sprintf("inflight %s (%s)", v, build)
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: inflight version

Prints the version of this build on one line, for example

  inflight v0.1.0 (commit 1a2b3c4d5e6f, go1.26.8 linux/amd64)

The version is the one make build sets (-ldflags '-X main.version=...'),
else the module version go install records, else (devel).
`)
	}
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}
