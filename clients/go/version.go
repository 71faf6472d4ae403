// SPDX-License-Identifier: PostgreSQL

package dlock

// Version of this client: the extension's default_version
// (pg_ext/dlock.control) it is released with; the module's tag is
// clients/go/v<Version>.0. A test checks the two agree.
const Version = "1.2"
