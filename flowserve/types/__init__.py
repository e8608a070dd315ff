"""The core's vocabulary, one noun per module: work items (`work`), instance specs
(`specs`), the events drivers send (`events`) and the commands the core answers with
(`commands`). All frozen dataclasses of plain data."""
