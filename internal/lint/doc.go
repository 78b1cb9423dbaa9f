// Package lint holds repository-wide static checks run by `go test`.
package lint
