CREATE TABLE "row_counts" (
	"table_name" text PRIMARY KEY NOT NULL,
	"row_count" bigint NOT NULL
);
