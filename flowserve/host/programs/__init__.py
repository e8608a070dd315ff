"""Programs in the live host: the book of open programs (`book`), one program as the
host keeps it (`open_program`), and programs shared across replicas (`shared`)."""
