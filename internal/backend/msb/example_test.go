package msb_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/msb"
)

// Open finds msb through MSB_PATH or PATH; the ledger records the path it
// found. Tests reach it through backend.Resolve with RIGHTSIZE_BACKEND=msb.
func ExampleOpen() {
	d, err := msb.Open(context.Background())
	if errors.Is(err, backend.ErrUnreachable) {
		fmt.Println("no msb here:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	fmt.Println(d.Name(), d.(*msb.Driver).MsbPath())
}
