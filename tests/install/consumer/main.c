/* Uses the installed C API: two ranks as threads, their numbers, teardown. */
#include <stdio.h>
#include <tessera/tessera.h>

int main(void) {
  int version = 0;
  tsrComm_t comms[2];
  int rank = -1, count = -1;
  if (tsrGetVersion(&version) != tsrSuccess || version != TESSERA_VERSION_CODE) return 1;
  if (tsrCommInitAll(comms, 2, NULL) != tsrSuccess) {
    fprintf(stderr, "%s\n", tsrGetLastError(NULL));
    return 2;
  }
  if (tsrCommUserRank(comms[1], &rank) != tsrSuccess || rank != 1) return 3;
  if (tsrCommCount(comms[0], &count) != tsrSuccess || count != 2) return 4;
  if (tsrCommDestroy(comms[0]) != tsrSuccess || tsrCommDestroy(comms[1]) != tsrSuccess) return 5;
  printf("consumer: tessera %s, 2 ranks OK\n", TESSERA_VERSION_STRING);
  return 0;
}
