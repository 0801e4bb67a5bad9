"""PopEF container: format constants, writer, reader and the popef_dump tool."""
