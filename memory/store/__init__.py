"""Storage: the sqlite shim, the connections (one writer, several readers), the
migrations, and every SQL statement the engine runs. Nothing outside this
package writes SQL."""
