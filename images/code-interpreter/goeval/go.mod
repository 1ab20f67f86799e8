// Build module of corral-go-eval, the Go interpreter behind the
// code-interpreter image's Go kernel (images/code-interpreter/build.sh
// builds it). Separate from corral's go.mod: corral never links yaegi.
module github.com/corral-dev/corral/images/code-interpreter/goeval

go 1.26

require github.com/traefik/yaegi v0.16.1
