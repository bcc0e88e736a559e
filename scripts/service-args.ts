/**
 * The node flags the image starts the service with (Dockerfile, CMD), so the load benchmark (bench/) and
 * the rolling-restart check run the service as it runs there. Without a heap limit V8 lets garbage pile
 * up far past what is live before a full collection: under 50 connections of cold pages the heap held
 * about 150 MB for some 50 MB live, and the process peaked at 286 MB. With the old generation capped at
 * 192 MB it collects sooner, for the same rate. What stays live is bounded (src/memory/budget.ts), well
 * inside the cap.
 */
export const SERVICE_NODE_ARGS: readonly string[] = ['--max-old-space-size=192']
