/* placeholder until the first reconcile module lands */
int reconcile_placeholder(void);
int reconcile_placeholder(void)
{
        return 0;
}
