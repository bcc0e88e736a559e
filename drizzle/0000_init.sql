CREATE TYPE "public"."message_priority" AS ENUM('low', 'normal', 'high', 'urgent');--> statement-breakpoint
CREATE TABLE "messages" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "messages_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"content" text NOT NULL,
	"subject" text,
	"priority" "message_priority" DEFAULT 'normal' NOT NULL,
	"author_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "movies" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "movies_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"title" text NOT NULL,
	"year" integer NOT NULL,
	"rating" numeric(3, 1) NOT NULL,
	"genre" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "users_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"subject_id" text NOT NULL,
	"email" text,
	"name" text,
	"role" text DEFAULT 'User' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "users_subject_id_unique" UNIQUE("subject_id")
);
--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_author_id_users_id_fk" FOREIGN KEY ("author_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "messages_created_at_id_idx" ON "messages" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "messages_priority_id_idx" ON "messages" USING btree ("priority","id");--> statement-breakpoint
CREATE INDEX "messages_subject_id_idx" ON "messages" USING btree ("subject","id");--> statement-breakpoint
CREATE INDEX "messages_author_id_id_idx" ON "messages" USING btree ("author_id","id");--> statement-breakpoint
CREATE INDEX "movies_title_id_idx" ON "movies" USING btree ("title","id");--> statement-breakpoint
CREATE INDEX "movies_year_id_idx" ON "movies" USING btree ("year","id");--> statement-breakpoint
CREATE INDEX "movies_rating_id_idx" ON "movies" USING btree ("rating","id");--> statement-breakpoint
CREATE INDEX "movies_genre_id_idx" ON "movies" USING btree ("genre","id");--> statement-breakpoint
CREATE INDEX "users_role_id_idx" ON "users" USING btree ("role","id");--> statement-breakpoint
CREATE INDEX "users_name_id_idx" ON "users" USING btree ("name","id");--> statement-breakpoint
CREATE INDEX "users_email_id_idx" ON "users" USING btree ("email","id");--> statement-breakpoint
CREATE INDEX "users_created_at_id_idx" ON "users" USING btree ("created_at","id");