// Package srcsize holds the repository's source-shape check and no code: its
// test walks every module of the repository (the core module and the ones
// nested in it) and fails for a non-test Go file over 600 lines, a function
// over 80 lines, or a file of the command-line tool that imports the UCX
// binding or the progress engine, which the tool reaches only through the
// public packages; a second test fails when a non-test file of package
// ucxnet other than its engine adapter imports the progress engine, a
// third when ucxnet's non-test files total over 1,500 lines, and a fourth
// when package session (internal/session) imports the UCX binding,
// the progress engine (its tests may, in files built only with cgo) or
// package ucxnet; a fifth fails for a type (outside internal/cucx) with
// more than 40 methods or methods in more than 8 files, and for an init
// function in ucxnet or internal/session.
package srcsize
