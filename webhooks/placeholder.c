/* placeholder until the webhooks land */
int webhooks_placeholder(void);
int webhooks_placeholder(void)
{
        return 0;
}
