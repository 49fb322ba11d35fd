/* hello_c: the C API (ros2/ros2.h) against an installed libros2, built with
 *   cc hello_c.c $(pkg-config --cflags --libs ros2)
 * Connects (control endpoint and secret file as arguments), writes one single
 * value of an object in pool "p", container "c", and reads it back. */
#include <stdio.h>
#include <string.h>

#include "ros2/ros2.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: hello_c CONTROL SECRET_FILE POOL CONTAINER\n");
    return 2;
  }
  ros2_client_options_t options;
  memset(&options, 0, sizeof(options));
  options.control = argv[1];
  options.secret_file = argv[2];
  ros2_client_t* client = NULL;
  ros2_pool_t* pool = NULL;
  ros2_cont_t* cont = NULL;
  ros2_obj_t* obj = NULL;
  const char value[] = "hello from C";
  char buf[64];
  size_t size = 0;
  int rc = ros2_connect(&options, &client);
  if (rc == 0) rc = ros2_pool_connect(client, argv[3], &pool);
  if (rc == 0) rc = ros2_cont_open(pool, argv[4], &cont);
  if (rc == 0) rc = ros2_obj_open(cont, ROS2_OC_S1, 0, 4242, &obj);
  if (rc == 0) rc = ros2_obj_put(obj, "greeting", "text", value, sizeof(value));
  if (rc == 0) rc = ros2_obj_get(obj, "greeting", "text", buf, sizeof(buf), &size);
  if (rc == 0 && (size != sizeof(value) || memcmp(buf, value, size) != 0)) {
    fprintf(stderr, "hello_c: the value read back differs\n");
    rc = -1;
  } else if (rc != 0) {
    fprintf(stderr, "hello_c: %s: %s\n", ros2_strerror(rc), ros2_last_error());
  } else {
    printf("hello_c: wrote and read back %zu bytes\n", size);
  }
  ros2_obj_close(obj);
  ros2_cont_close(cont);
  ros2_pool_close(pool);
  ros2_client_close(client);
  return rc == 0 ? 0 : 1;
}
