/* Checks of the libros2 C API that need no server, written in C (compiled as
 * C) so the header is proven to be valid C. Each function returns 0 when every
 * check held, otherwise the source line of the first failed check; the
 * GoogleTest wrapper in client_unit_test.cc asserts on the result. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ros2/ros2.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) {        \
      return __LINE__;    \
    }                     \
  } while (0)

int ros2_c_check_null_handles(void);
int ros2_c_check_connect_arguments(void);
int ros2_c_check_strerror(void);

int ros2_c_check_null_handles(void) {
  ros2_pool_t* pool = (ros2_pool_t*)(uintptr_t)1;
  ros2_cont_t* cont = (ros2_cont_t*)(uintptr_t)1;
  ros2_obj_t* obj = (ros2_obj_t*)(uintptr_t)1;
  ros2_eq_t* eq = (ros2_eq_t*)(uintptr_t)1;
  ros2_event_t events[2];
  char buf[16];
  size_t size = 0;
  uint64_t end = 0;

  CHECK(ros2_pool_connect(NULL, "pool", &pool) == -EINVAL);
  CHECK(pool == NULL); /* outputs are cleared on failure */
  CHECK(strstr(ros2_last_error(), "invalid client handle") != NULL);
  CHECK(ros2_cont_open(NULL, "cont", &cont) == -EINVAL);
  CHECK(cont == NULL);
  CHECK(ros2_obj_open(NULL, ROS2_OC_S1, 0, 1, &obj) == -EINVAL);
  CHECK(obj == NULL);
  CHECK(ros2_eq_create(NULL, &eq) == -EINVAL);
  CHECK(eq == NULL);
  CHECK(ros2_obj_put(NULL, "d", "a", "x", 1) == -EINVAL);
  CHECK(ros2_obj_get(NULL, "d", "a", buf, sizeof(buf), &size) == -EINVAL);
  CHECK(ros2_obj_write_array(NULL, "d", "a", 0, 1, buf, sizeof(buf)) == -EINVAL);
  CHECK(ros2_obj_read_array(NULL, "d", "a", 0, 1, 1, buf, sizeof(buf)) == -EINVAL);
  CHECK(ros2_obj_punch(NULL) == -EINVAL);
  CHECK(ros2_obj_punch_dkey(NULL, "d") == -EINVAL);
  CHECK(ros2_obj_array_end(NULL, "d", "a", &end) == -EINVAL);
  CHECK(ros2_eq_poll(NULL, events, 2) == -EINVAL);
  CHECK(ros2_eq_wait(NULL, events, 2, 1, 10) == -EINVAL);
  CHECK(ros2_eq_in_flight(NULL) == 0);

  /* A pointer that is not a handle of the right kind is refused too. */
  {
    uint32_t not_a_handle[8];
    memset(not_a_handle, 0, sizeof(not_a_handle));
    CHECK(ros2_obj_punch((ros2_obj_t*)(void*)not_a_handle) == -EINVAL);
    CHECK(ros2_eq_poll((ros2_eq_t*)(void*)not_a_handle, events, 2) == -EINVAL);
  }

  /* Closing NULL is harmless. */
  ros2_obj_close(NULL);
  ros2_cont_close(NULL);
  ros2_pool_close(NULL);
  ros2_eq_destroy(NULL);
  ros2_client_close(NULL);
  return 0;
}

int ros2_c_check_connect_arguments(void) {
  ros2_client_t* client = (ros2_client_t*)(uintptr_t)1;
  ros2_client_options_t opts;
  ros2_eq_t* eq = NULL;
  ros2_event_t events[4];
  ros2_pool_t* pool = NULL;
  int rc;

  CHECK(ros2_connect(NULL, &client) == -EINVAL);
  CHECK(client == NULL);
  CHECK(ros2_connect(&opts, NULL) == -EINVAL);

  memset(&opts, 0, sizeof(opts));
  CHECK(ros2_connect(&opts, &client) == -EINVAL);
  CHECK(strstr(ros2_last_error(), "control") != NULL);

  opts.control = "unix:/nonexistent/ros2-c-test.sock";
  opts.secret = "not-a-secret";
  opts.transport = "bogus";
  CHECK(ros2_connect(&opts, &client) == -EINVAL);
  CHECK(strstr(ros2_last_error(), "bogus") != NULL);

  /* A valid configuration connects lazily: no server is needed yet. */
  opts.transport = "tcp";
  opts.io_timeout_ms = 1000;
  rc = ros2_connect(&opts, &client);
  CHECK(rc == 0);
  CHECK(client != NULL);
  CHECK(ros2_last_error()[0] == '\0');

  CHECK(ros2_pool_connect(client, NULL, &pool) == -EINVAL);
  CHECK(ros2_eq_create(client, &eq) == 0);
  CHECK(ros2_eq_poll(eq, events, 4) == 0);
  CHECK(ros2_eq_wait(eq, events, 4, 1, 10) == 0); /* nothing in flight */
  CHECK(ros2_eq_in_flight(eq) == 0);
  CHECK(ros2_eq_poll(eq, NULL, 4) == -EINVAL);
  ros2_eq_destroy(eq);
  ros2_client_close(client);
  return 0;
}

int ros2_c_check_strerror(void) {
  CHECK(strcmp(ros2_strerror(0), "success") == 0);
  CHECK(strlen(ros2_strerror(-EINVAL)) > 0);
  CHECK(strcmp(ros2_strerror(-EINVAL), ros2_strerror(EINVAL)) == 0);
  CHECK(strcmp(ros2_strerror(-ENOTSUP), ros2_strerror(-EINVAL)) != 0);
  return 0;
}
