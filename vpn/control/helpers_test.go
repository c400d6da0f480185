package control

import "time"

var testTime = time.Unix(1_800_000_000, 0)
