package scripts_test

import (
	"bufio"
	"fmt"
	"io/fs"

	"github.com/rightsize/rightsize-go/reaper/scripts"
)

// The two scripts, and the line each begins with: watchdog.sh's names the
// shell it runs under, watchdog.ps1's what it is.
func ExampleFS() {
	ents, err := fs.ReadDir(scripts.FS, ".")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range ents {
		f, err := scripts.FS.Open(e.Name())
		if err != nil {
			fmt.Println(err)
			return
		}
		first := bufio.NewScanner(f)
		first.Scan()
		f.Close()
		fmt.Printf("%s: %s\n", e.Name(), first.Text())
	}
	// Output:
	// watchdog.ps1: # rightsize-go watchdog for Windows (Windows PowerShell 5.1; written to also run
	// watchdog.sh: #!/bin/sh
}
